#!/bin/sh
# examples/transformer_forecast.yaml trains with the CLI for 2 epochs: the data and the Keras file
# are made by tools/make_transformer_forecast.py into a scratch folder, and the plan is copied
# there with its paths and epochs changed. Usage: transformer_example_test.sh SOURCE_DIR NNFLEET DIR
set -eu
src=$1 bin=$2 dir=$3
rm -rf "$dir" && mkdir -p "$dir"
/usr/bin/python3 "$src/tools/make_transformer_forecast.py" "$dir"
sed -e "s|\.\./build/bench-data/transformer/|$dir/|g" -e "s|epochs: 20|epochs: 2|" \
  "$src/examples/transformer_forecast.yaml" > "$dir/plan.yaml"
"$bin" train "$dir/plan.yaml" --out "$dir/run"
# Both models finished their 2 epochs.
test "$(grep -c '"status": "done"' "$dir/run/results.json")" -eq 2
