mod blackhole;
mod common;
mod conformance;
mod moves;
mod open;
mod outage;
