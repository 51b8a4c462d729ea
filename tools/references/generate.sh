#!/usr/bin/env bash
# Regenerates every reference CSV under tests/data/ (a few minutes on one core).
# Usage: tools/references/generate.sh [python]   (default: .venv/bin/python, else python3)
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
py=${1:-}
if [ -z "$py" ]; then
    if [ -x .venv/bin/python ]; then py=.venv/bin/python; else py=python3; fi
fi
r=tools/references
d=tests/data
run() { echo "  $*" >&2; "$py" "$@"; }

# Pendulum chain (paper 003), moving suspension, 200 s; sampling keeps each file < 1 MB.
run $r/pendulum_chain.py --links 4 --t-end 200 --dt 0.1 --out $d/pendulum_chain_n4.csv
run $r/pendulum_chain.py --links 8 --t-end 200 --dt 0.1 --out $d/pendulum_chain_n8.csv
run $r/pendulum_chain.py --links 16 --t-end 200 --dt 0.1 --out $d/pendulum_chain_n16.csv
run $r/pendulum_chain.py --links 32 --t-end 200 --dt 0.25 --out $d/pendulum_chain_n32.csv
run $r/pendulum_chain.py --links 64 --t-end 200 --dt 0.5 --out $d/pendulum_chain_n64.csv
# Same with the velocities of a Cartesian code started "at rest" (minimal-norm projection).
run $r/pendulum_chain.py --links 4 --init projected --t-end 200 --dt 0.1 --out $d/pendulum_chain_n4_projected.csv
run $r/pendulum_chain.py --links 8 --init projected --t-end 200 --dt 0.1 --out $d/pendulum_chain_n8_projected.csv
run $r/pendulum_chain.py --links 16 --init projected --t-end 200 --dt 0.1 --out $d/pendulum_chain_n16_projected.csv
run $r/pendulum_chain.py --links 32 --init projected --t-end 200 --dt 0.25 --out $d/pendulum_chain_n32_projected.csv
run $r/pendulum_chain.py --links 64 --init projected --t-end 200 --dt 0.5 --out $d/pendulum_chain_n64_projected.csv
# Fixed suspension, chain released straight at 0.1 rad (energy conserved).
run $r/pendulum_chain.py --links 16 --fixed --phi0 0.1 --t-end 20 --dt 0.02 --velocities --out $d/pendulum_chain_fixed_n16.csv

# Stiff double pendulum (paper 000), 2 s.
run $r/double_pendulum_stiff.py --t-end 2 --dt 0.001 --out $d/double_pendulum_stiff.csv
# The same bars without springs (conservative, non-stiff, for convergence orders), 3 s.
run $r/double_pendulum_stiff.py --springs 0 0 0 0 --method DOP853 --rtol 1e-13 --atol 1e-14 --t-end 3 --dt 0.002 --out $d/double_pendulum_free.csv

# Slider-crank (paper 004): 1 rev/s, smooth start, and Coulomb friction mu = 0.4.
run $r/slider_crank.py --t-end 8 --dt 0.01 --out $d/slider_crank.csv
run $r/slider_crank.py --motion smooth --ramp 1 --t-end 8 --dt 0.01 --out $d/slider_crank_smooth.csv
run $r/slider_crank.py --mu 0.4 --t-end 8 --dt 0.01 --out $d/slider_crank_mu04.csv

# Four-link (paper 004): pi rad/s and smooth start.
run $r/four_link.py --t-end 8 --dt 0.01 --out $d/four_link.csv
run $r/four_link.py --motion smooth --ramp 1 --t-end 8 --dt 0.01 --out $d/four_link_smooth.csv

# Quarter-car rig: 1 cm, 1.5 Hz stamp sine from static equilibrium.
run $r/quarter_car.py --t-end 5 --dt 0.01 --out $d/quarter_car.csv
# Quarter car with the tire, braking over a cleat (models/quarter_car_tire.toml), 1.5 s.
run $r/quarter_car_tire.py --t-end 1.5 --dt 0.001 --out $d/quarter_car_tire.csv

# Bouncing balls (paper 002), 5 s, with the contact instants.
run $r/bouncing_balls.py --t-end 5 --dt 0.001 --out $d/bouncing_balls.csv --events $d/bouncing_balls_events.csv

# Spherical chain: 8 bars spinning at 1 rad/s about their axes, oblique gravity, 2 s.
run $r/spherical_chain.py --t-end 2 --dt 0.01 --out $d/spherical_chain.csv

# Cylindrical, universal and planar tree joints (models/elements/{cylinder_pendulum,hooke_pendulum,planar_block}.toml), 3 s.
for m in cylinder hooke planar; do
    run $r/tree_joints.py --model $m --t-end 3 --dt 0.01 --out $d/tree_joint_$m.csv
done

# Pendulum on a torsion spring table and a torsion damper table (models/elements/table_pendulum.toml), 2 s.
run $r/table_pendulum.py --t-end 2 --dt 0.01 --out $d/table_pendulum.csv
