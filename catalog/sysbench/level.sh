#!/bin/bash
# virtwork sysbench at one level of its load profile: $1 is the events per second sysbench
# aims at (--rate), computed by {{threads}} threads, until the load driver stops it at the
# next level (--time=0: no time limit). A level above what the threads can compute fills
# sysbench's event queue; sysbench then stops and the unit restarts.
exec sysbench cpu --threads={{threads}} --cpu-max-prime={{cpu-max-prime}} --time=0 --rate="$1" --report-interval=60 run
