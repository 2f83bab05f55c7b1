//! toren-worker
