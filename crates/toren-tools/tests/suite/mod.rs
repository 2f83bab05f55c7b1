mod bash;
mod common;
mod files;
mod line_endings;
mod send;
mod size_limits;
mod special_files;
mod toolkit;
