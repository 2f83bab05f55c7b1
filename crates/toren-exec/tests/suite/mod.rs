mod harness;
mod helper;
