mod backend;
mod support;
