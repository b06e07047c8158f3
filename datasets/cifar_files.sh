# What datasets/cifar10.sh and datasets/cifar100.sh share, sourced by both: finding the
# unpacked directory, checking each binary file's size, and saying where to get the data.

# cifar_dir DIR SUB: DIR, or DIR/SUB when the tarball was unpacked inside DIR (minivit reads
# either).
cifar_dir() {
  if [[ -d $1/$2 ]]; then echo "$1/$2"; else echo "$1"; fi
}

# cifar_check_files DIR RECORD_BYTES NAME:RECORDS...: exits 1 with one line per missing or
# wrongly sized file on stderr, after CIFAR_TITLE, CIFAR_TARBALL, CIFAR_TARBALL_SIZE and
# CIFAR_SUB (the directory the tarball unpacks into) say where to get the files.
cifar_check_files() {
  local dir=$1 record=$2 entry name records file want size
  shift 2
  local problems=()
  for entry in "$@"; do
    name=${entry%%:*} records=${entry##*:}
    file=$dir/$name want=$((records * record))
    if [[ ! -f $file ]]; then
      problems+=("$file: missing")
    elif size=$(stat -c %s "$file") && (( size != want )); then
      problems+=("$file: $size bytes, expected $want ($records records of $record bytes)")
    fi
  done
  (( ${#problems[@]} == 0 )) && return 0
  # Unpacking into the parent of a directory named like the tarball's gives that directory.
  local target=$dir
  [[ $(basename "$dir") == "$CIFAR_SUB" ]] && target=$(dirname "$dir")
  printf '%s\n' "${problems[@]}" >&2
  cat >&2 <<MSG

$CIFAR_TITLE is not complete in $dir.
Download the binary version (not the python or matlab one), $CIFAR_TARBALL
(about $CIFAR_TARBALL_SIZE), from
  https://www.cs.toronto.edu/~kriz/cifar.html
and unpack it with
  mkdir -p $target && tar -xzf $CIFAR_TARBALL -C $target
which creates $target/$CIFAR_SUB/; then run this script again.
MSG
  exit 1
}
