mod errors;
mod exec;
mod isolation;
mod ownership;
mod reaper;
mod recreate;
mod spec;
mod support;
