mod bash;
mod common;
mod files;
mod toolkit;
