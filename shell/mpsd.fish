# mpsd hook for fish (3.5 and later): in a project opted in with `mpsd enable`, exports
# PYTORCH_MPS_HIGH_WATERMARK_RATIO and PYTORCH_MPS_LOW_WATERMARK_RATIO as limits.toml holds them;
# outside, takes back what it exported. Load it with `mpsd hook fish | source` or by sourcing it.
#
# Each prompt (and each change of directory) runs builtins only, never a subprocess: fish runs
# builtins in command substitutions itself. limits.toml is parsed again only when its text or
# $PWD changed. Values must be plain decimals in (0, 2] with low <= high to be exported (PyTorch
# reads garbage as 0.0, which removes the cap); nothing read is ever evaluated. A value the user
# set by hand (anything but what the hook last exported, which it keeps in _MPSD_EXPORTED_HIGH and
# _MPSD_EXPORTED_LOW) is the user's: both are left alone.

# A ratio as the file holds it -> billionths on stdout; status 1 unless it is a plain decimal
# in (0, 2].
function _mpsd_number
    string match -qr '^[0-2](\.[0-9]{1,9})?$' -- $argv[1]; or return 1
    set -l parts (string split -- . $argv[1])
    set -l frac (string pad -r -c 0 -w 9 -- "$parts[2]")
    set -l value (math "$parts[1] * 1000000000 + $frac")
    test $value -gt 0 -a $value -le 2000000000; or return 1
    echo $value
end

# Parse limits.toml's text ($argv[1]) for the physical directory ($argv[2]): _mpsd_want_high
# and _mpsd_want_low get both values when it is inside a project and both are valid, else none.
# The first `high_watermark_ratio = ` and `low_watermark_ratio = ` lines; the project lines
# (`    "/path",`) between the first `projects = [` line and the next `]` line.
function _mpsd_parse
    set -g _mpsd_want_high
    set -g _mpsd_want_low
    set -l lines (string split -- \n $argv[1])
    set -l start (contains -i -- 'projects = [' $lines); or return 0
    set -l block $lines[(math $start + 1)..-1]
    set -l stop (contains -i -- ']' $block)
    if test -n "$stop"
        set block $block[1..(math $stop - 1)]
        test $stop -gt 1; or set block
    end
    set -l dir $argv[2]
    set -l inside
    while test -n "$dir"
        if not string match -qr '["\\\\[:cntrl:]]' -- $dir
            and contains -- "    \"$dir\"," $block
            set inside 1
            break
        end
        set dir (string replace -r -- '/[^/]*$' '' $dir)
    end
    if test -z "$inside"
        contains -- '    "/",' $block; or return 0
    end
    set -l high (string replace -rf -- '^high_watermark_ratio = ' '' $lines)
    set -l low (string replace -rf -- '^low_watermark_ratio = ' '' $lines)
    set -l high_value (_mpsd_number "$high[1]"); or return 0
    set -l low_value (_mpsd_number "$low[1]"); or return 0
    test $low_value -le $high_value; or return 0
    set -g _mpsd_want_high $high[1]
    set -g _mpsd_want_low $low[1]
end

function _mpsd_hook --on-event fish_prompt --on-variable PWD
    set -l saved_status $status
    # limits.toml: where paths.py puts it ($MPSD_CONFIG_DIR, $XDG_CONFIG_HOME/mps, ~/.config/mps).
    set -l file "$MPSD_CONFIG_DIR"
    if test -z "$file"
        if string match -q -- '/*' "$XDG_CONFIG_HOME"
            set file "$XDG_CONFIG_HOME/mps"
        else
            set file "$HOME/.config/mps"
        end
    end
    if test "$file" = '~'
        set file "$HOME"
    else if string match -q -- '~/*' "$file"
        set file "$HOME/"(string sub -s 3 -- "$file")
    end
    set file "$file/limits.toml"
    set -l text ''
    if test -f "$file" -a -r "$file"
        set text (string collect -- < "$file" 2>/dev/null)
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
