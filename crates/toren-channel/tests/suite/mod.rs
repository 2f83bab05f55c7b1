mod factory;
mod kind;
mod terminal;
