mod proxy;
mod support;
