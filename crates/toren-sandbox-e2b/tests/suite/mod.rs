mod backend;
mod files;
mod support;
