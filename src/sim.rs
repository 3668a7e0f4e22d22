//! Deterministic simulation of the hub (filled in by the simulation work).
