mod backend;
mod files;
mod network;
mod support;
