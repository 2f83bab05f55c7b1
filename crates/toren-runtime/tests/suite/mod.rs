mod support;

mod cancel;
mod drive;
mod follow;
mod follow_end;
mod interrupt;
mod many;
mod park;
