mod agent_errors;
mod agent_files;
mod common;
mod fuzz_agent_file;
mod lookup;
mod network;
mod secrets;
mod settings;
