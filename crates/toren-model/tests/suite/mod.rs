mod anthropic;
mod build;
mod common;
mod openai;
mod same_scenario;
mod scripted;
