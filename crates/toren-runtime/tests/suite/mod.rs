mod support;

mod cancel;
mod drive;
mod follow;
mod interrupt;
mod many;
