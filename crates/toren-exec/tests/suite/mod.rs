mod cancel;
mod harness;
mod helper;
