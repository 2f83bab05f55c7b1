//! toren-agent
