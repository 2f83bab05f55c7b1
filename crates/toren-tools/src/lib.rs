//! The sandbox toolkit: `bash`, `read_file`, `write_file`, `edit_file`.
