//! Benchmarks only: see `benches/`. This library is empty on purpose.
