mod proxy;
mod secrets;
mod support;
