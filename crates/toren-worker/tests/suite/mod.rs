mod channel;
mod checkpoints;
mod conflicts;
mod egress;
mod interrupted;
mod lease_renewal;
mod unreplayable;
