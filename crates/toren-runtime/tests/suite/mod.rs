mod support;

mod drive;
