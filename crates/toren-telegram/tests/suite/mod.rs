mod api;
mod render;
