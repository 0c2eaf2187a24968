# Sourced by compare_ik.sh and sweep.sh: the path of one ik_llama.cpp tool, built if missing.
#
#   ik_tool TARGET   # prints $IK_DIR/build/bin/TARGET (default IK_DIR: target/ik_llama.cpp)
#
# First use clones the public repository ikawrakow/ik_llama.cpp at $IK_COMMIT (default
# 8337e4cd3, the commit docs/perf measured) into $IK_DIR and builds TARGET with native CPU
# flags (the library about 12 min on 2 cores, each further tool seconds; needs git and cmake).
# Expects $root, the repository root.
ik_tool() {
  local target=$1 commit=${IK_COMMIT:-8337e4cd3}
  local src=${IK_DIR:-$root/target/ik_llama.cpp}
  if [ ! -x "$src/build/bin/$target" ]; then
    if [ ! -d "$src/.git" ]; then
      git clone -q https://github.com/ikawrakow/ik_llama.cpp "$src"
    fi
    git -C "$src" checkout -q "$commit"
    echo "building ik_llama.cpp $commit $target in $src" >&2
    cmake -S "$src" -B "$src/build" -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
      -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_SERVER=OFF >&2
    cmake --build "$src/build" --target "$target" -j"$(nproc)" >&2
  fi
  echo "$(cd "$src/build/bin" && pwd)/$target"
}
