mod approval;
mod common;
mod config_errors;
mod providers;
mod resume;
mod scripted;
