mod answers;
mod proxy;
mod secrets;
mod support;
