//! Renders a cloud-config value to `#cloud-config` YAML: packages, write_files, runcmd and the
//! users/SSH block. Knows nothing of workloads.
