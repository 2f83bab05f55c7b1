mod approval;
mod chaos;
mod common;
mod config_errors;
mod providers;
mod resume;
mod scripted;
mod trust;
