mod anthropic;
mod build;
mod common;
mod limits;
mod openai;
mod same_scenario;
mod scripted;
