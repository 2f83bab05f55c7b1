mod channel;
mod checkpoints;
mod conflicts;
mod lease_renewal;
mod unreplayable;
