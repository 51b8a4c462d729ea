//! FMI-agnostic co-simulation: a model instance that advances to a communication point.
