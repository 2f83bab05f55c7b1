mod cancel;
mod forward;
mod harness;
mod helper;
