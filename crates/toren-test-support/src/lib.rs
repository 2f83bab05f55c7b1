//! toren-test-support
