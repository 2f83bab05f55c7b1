mod channel;
mod checkpoints;
mod conflicts;
mod egress;
mod lease_renewal;
mod unreplayable;
