//! toren-config
