# mpsd hook for fish (3.5 and later): in a project opted in with `mpsd enable`, exports
# PYTORCH_MPS_HIGH_WATERMARK_RATIO and PYTORCH_MPS_LOW_WATERMARK_RATIO as limits.toml holds them;
# outside, takes back what it exported. Load it with `mpsd hook fish | source` or by sourcing it.
#
# Each prompt (and each change of directory) runs builtins only, never a subprocess: fish runs
# builtins in command substitutions itself. limits.toml is parsed again only when its text or
# $PWD changed, with list builtins (time linear in the file). A file larger than mpsd ever
# writes (256 KiB), or with a NUL byte and more after it, is ignored. Values must be plain
# decimals in (0, 2] with low <= high to be exported (PyTorch reads garbage as 0.0, which
# removes the cap); nothing read is ever evaluated. A value the user set by hand (anything but
# what the hook last exported, which it keeps in _MPSD_EXPORTED_HIGH and _MPSD_EXPORTED_LOW) is
# the user's: both are left alone. A config or data dir of mpsd's that is not the user's own
# (`test -O`) makes it export nothing (docs: the trust rule).

# Parse limits.toml's text ($argv[1]) for the physical directory ($argv[2]): _mpsd_want_high
# and _mpsd_want_low get both values when it is inside a project and both are valid, else none.
# The first `high_watermark_ratio = ` and `low_watermark_ratio = ` lines; the project lines
# (`    "/path",`, no quote, backslash or control character in the path) between the first
# `projects = [` line and the next `]` line. fish's `test` compares the decimals, once the
# regular expression has let only plain ones through.
function _mpsd_parse
    set -g _mpsd_want_high
    set -g _mpsd_want_low
    # Each command substitution costs fish some 50 µs: as few as possible, none in loops.
    set -l lines (string split -- \n $argv[1])
    set -l start (contains -i -- 'projects = [' $lines); or return 0
    set -l block $lines
    set -e block[1..$start]
    set -l stop (contains -i -- ']' $block)
    and set -e block[$stop..-1]
    set block (string match -r -- '^    "/[^"\\\\\x00-\x1f\x7f]*",$' $block)
    # The directory and each of its parents, as project lines.
    set -l parts (string split -- / $argv[2])
    set -l path ''
    set -l inside
    contains -- '    "/",' $block; and set inside 1
    for part in $parts
        test -n "$part"; or continue
        set path "$path/$part"
        contains -- "    \"$path\"," $block; and set inside 1
    end
    test -n "$inside"; or return 0
    # Name and value of every ratio line, in order; the first of each name counts.
    set -l found (string match -r -- '^(high|low)_watermark_ratio = (.*)$' $lines)
    set -l high
    set -l low
    set -l seen
    while set -q found[3]
        if not contains -- $found[2] $seen
            set -a seen $found[2]
            set $found[2] $found[3]
        end
        set -e found[1..3]
    end
    string match -qr -- '^[0-2](\.[0-9]{1,9})?$' "$high"; or return 0
    string match -qr -- '^[0-2](\.[0-9]{1,9})?$' "$low"; or return 0
    test $high -gt 0 -a $high -le 2 -a $low -gt 0 -a $low -le $high; or return 0
    set -g _mpsd_want_high $high
    set -g _mpsd_want_low $low
end

# One of mpsd's dirs as paths.py has it: $argv[1] (MPSD_*_DIR, a leading ~ expanded), else
# $argv[2]/mps when $argv[2] (XDG_*_HOME) is absolute, else ~/$argv[3]/mps. Printed; a builtin
# in a command substitution runs in fish itself (no fork).
function _mpsd_dir
    set -l dir $argv[1]
    if test -z "$dir"
        if string match -q -- '/*' "$argv[2]"
            set dir "$argv[2]/mps"
        else
            set dir "$HOME/$argv[3]/mps"
        end
    end
    if test "$dir" = '~'
        set dir "$HOME"
    else if string match -q -- '~/*' "$dir"
        set dir "$HOME/"(string sub -s 3 -- "$dir")
    end
    printf '%s\n' "$dir"
end

function _mpsd_hook --on-event fish_prompt --on-variable PWD
    set -l saved_status $status
    # mpsd's config and data dirs, where paths.py puts them, worked out again only when one of
    # the variables they come from changed.
    set -l key "$MPSD_CONFIG_DIR:$XDG_CONFIG_HOME:$MPSD_DATA_DIR:$XDG_DATA_HOME:$HOME"
    if test "$key" != "$_mpsd_file_key"
        set -g _mpsd_file_key $key
        set -g _mpsd_data (_mpsd_dir "$MPSD_DATA_DIR" "$XDG_DATA_HOME" .local/share)
        set -g _mpsd_conf (_mpsd_dir "$MPSD_CONFIG_DIR" "$XDG_CONFIG_HOME" .config)
        set -g _mpsd_file "$_mpsd_conf/limits.toml"
    end
    # fish has no builtin that tells a file's size: `read` is bounded instead, by a local
    # fish_read_limit (bytes): past it, read stops, fails (status 122) and sets nothing, quietly
    # (a command substitution printed "Too much data emitted" at every prompt for a 100 MB
    # file, which it read whole). `read -z` stops at a NUL, and a second read finds what follows
    # it: such a file is not mpsd's either. Both read in blocks (the file is seekable).
    # The trust rule (paths.untrusted) as far as a builtin tells it: the config dir and the data
    # dir (when there is one) and limits.toml itself are the user's own (-O: a file another
    # user wrote into a dir others can write is theirs), else nothing is read, nothing exported.
    set -l text ''
    if test -f "$_mpsd_file" -a -r "$_mpsd_file" -a -O "$_mpsd_file" -a -O "$_mpsd_conf"
        and test -O "$_mpsd_data" -o ! -e "$_mpsd_data"
        set -l fish_read_limit 262144
        set -l IFS
        set -l rest
        begin
            builtin read -z text; or set text ''
            builtin read -z -n 1 rest; and set text ''
        end <"$_mpsd_file" 2>/dev/null
    end
    if test -z "$_mpsd_seen" -o "$PWD" != "$_mpsd_pwd" -o "$text" != "$_mpsd_text"
        set -g _mpsd_seen 1
        set -g _mpsd_pwd "$PWD"
        set -g _mpsd_text "$text"
        _mpsd_parse "$text" (path resolve -- "$PWD")
    end
    # Set by hand: present but not what the hook exported last. Then both are the user's.
    set -l by_hand
    if set -q PYTORCH_MPS_HIGH_WATERMARK_RATIO
        if not set -q _MPSD_EXPORTED_HIGH; or test "$PYTORCH_MPS_HIGH_WATERMARK_RATIO" != "$_MPSD_EXPORTED_HIGH"
            set by_hand 1
        end
    end
    if set -q PYTORCH_MPS_LOW_WATERMARK_RATIO
        if not set -q _MPSD_EXPORTED_LOW; or test "$PYTORCH_MPS_LOW_WATERMARK_RATIO" != "$_MPSD_EXPORTED_LOW"
            set by_hand 1
        end
    end
    if test -n "$by_hand"
    else if test -n "$_mpsd_want_high"
        if test "$PYTORCH_MPS_HIGH_WATERMARK_RATIO" != "$_mpsd_want_high" -o "$PYTORCH_MPS_LOW_WATERMARK_RATIO" != "$_mpsd_want_low"
            set -gx PYTORCH_MPS_HIGH_WATERMARK_RATIO $_mpsd_want_high
            set -gx PYTORCH_MPS_LOW_WATERMARK_RATIO $_mpsd_want_low
            set -gx _MPSD_EXPORTED_HIGH $_mpsd_want_high
            set -gx _MPSD_EXPORTED_LOW $_mpsd_want_low
        end
    else
        set -e -g PYTORCH_MPS_HIGH_WATERMARK_RATIO PYTORCH_MPS_LOW_WATERMARK_RATIO _MPSD_EXPORTED_HIGH _MPSD_EXPORTED_LOW
    end
    return $saved_status
end
