mod argv;
mod local;
mod workspace;
