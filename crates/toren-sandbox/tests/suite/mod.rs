mod argv;
mod fuzz_paths;
mod kept_sandbox;
mod limits;
mod local;
mod seam;
mod support;
mod workspace;
