mod argv;
mod fuzz_paths;
mod limits;
mod local;
mod seam;
mod workspace;
