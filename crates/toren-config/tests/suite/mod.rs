mod agent_errors;
mod agent_files;
mod common;
mod lookup;
mod settings;
