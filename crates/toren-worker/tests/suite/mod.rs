mod channel;
mod conflicts;
mod lease_renewal;
mod unreplayable;
