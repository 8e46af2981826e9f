//! mco: a Machine Config Operator in Rust.
//!
//! Modules in data-flow order: manifests come in ([`manifest`], [`ignition`], [`validation`]),
//! become objects ([`model`]), are merged into rendered configs ([`render`]) and rolled out
//! ([`rollout`]); every change is an event ([`event`]) in the log ([`store`]) folded into the
//! in-memory projection ([`state`]) through the one write path ([`command`]); [`controller`]s
//! reconcile it, [`api`] serves it, [`daemon`] applies it on a node through [`host`], [`client`]
//! and [`cli`] talk to the API and [`up`] runs it all on one machine, its
//! children spawned through [`process`].

pub mod admission;
pub mod api;
pub mod apply;
pub mod auth;
pub mod cli;
pub mod client;
pub mod command;
pub mod controller;
pub mod credentials;
pub mod daemon;
pub mod diff;
pub mod disruption;
pub mod drift;
pub mod event;
pub mod fsutil;
pub mod fuzzing;
pub mod generate;
pub mod gofmt;
pub mod history;
pub mod host;
pub mod ignition;
pub mod limits;
pub mod manifest;
pub mod metrics;
pub mod model;
pub mod preview;
pub mod process;
pub mod protocol;
pub mod query;
pub mod render;
pub mod rollback;
pub mod rollout;
pub mod server;
pub mod sim;
pub mod state;
pub mod store;
pub mod tls;
pub mod up;
pub mod validation;
