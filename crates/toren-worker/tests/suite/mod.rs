mod conflicts;
mod lease_renewal;
