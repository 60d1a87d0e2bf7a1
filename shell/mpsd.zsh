# mpsd hook for zsh: in a project opted in with `mpsd enable`, exports
# PYTORCH_MPS_HIGH_WATERMARK_RATIO and PYTORCH_MPS_LOW_WATERMARK_RATIO as limits.toml holds them;
# outside, takes back what it exported. Load it with `eval "$(mpsd hook zsh)"` or by sourcing it.
#
# Each prompt (and each cd) runs builtins only, never a subprocess: a glob qualifier checks the
# file's size, `$(<file)` is read by zsh itself, the physical directory is ${PWD:A}, and the file
# is parsed again only when its text or $PWD changed. A file larger than mpsd ever writes
# (256 KiB), or with a NUL byte, is ignored. Values must be plain decimals in (0, 2] with
# low <= high to be exported (PyTorch reads garbage as 0.0, which removes the cap); nothing read
# is ever evaluated. A value the user set by hand (anything but what the hook last exported,
# which it keeps in _MPSD_EXPORTED_HIGH and _MPSD_EXPORTED_LOW) is the user's: both are left
# alone. `emulate -L zsh` in each function: the user's options (ksh_arrays, no_unset, err_exit,
# sh_word_split...) do not reach the code here. A config or data dir of mpsd's that is not the
# user's own (`-O`) makes it export nothing (docs: the trust rule).

# A ratio as the file holds it -> _mpsd_num, fixed point with 9 decimals; empty unless it is a
# plain decimal in (0, 2].
_mpsd_number() {
  emulate -L zsh
  _mpsd_num=''
  local _mpsd_int _mpsd_frac=''
  case $1 in
    ([0-2]) _mpsd_int=$1 ;;
    ([0-2].[0-9]*)
      _mpsd_int=${1%%.*} _mpsd_frac=${1#*.}
      case $_mpsd_frac in (*[^0-9]*) return 0 ;; esac
      (( ${#_mpsd_frac} <= 9 )) || return 0
      ;;
    (*) return 0 ;;
  esac
  _mpsd_frac=${_mpsd_frac}000000000
  _mpsd_num=$(( _mpsd_int * 1000000000 + 10#${_mpsd_frac[1,9]} ))
  if (( _mpsd_num <= 0 || _mpsd_num > 2000000000 )); then
    _mpsd_num=''
  fi
}

# Parse limits.toml's text ($1) for the physical directory: _MPSD_WANT_HIGH/_MPSD_WANT_LOW get
# both values when it is inside a project and both are valid, else both are empty. Pattern
# matching on the whole text, no loop over its lines: the first `high_watermark_ratio = ` and
# `low_watermark_ratio = ` lines; the project lines (`    "/path",`) between the first
# `projects = [` line and the next `]` line; the directory is inside when it or one of its
# parents is one of them.
_mpsd_parse() {
  emulate -L zsh
  typeset -g _MPSD_WANT_HIGH='' _MPSD_WANT_LOW=''
  local _mpsd_nl=$'\n' _mpsd_text _mpsd_high _mpsd_low _mpsd_block _mpsd_dir
  local _mpsd_inside='' _mpsd_num _mpsd_high_num _mpsd_key
  _mpsd_text="$_mpsd_nl$1$_mpsd_nl"
  # `${x%%"$key"*}` and an offset, not `${x#*"$key"}`, which is matched in quadratic time.
  _mpsd_key="${_mpsd_nl}projects = [$_mpsd_nl"
  _mpsd_block=${_mpsd_text%%"$_mpsd_key"*}
  (( ${#_mpsd_block} < ${#_mpsd_text} )) || return 0
  _mpsd_block="$_mpsd_nl${_mpsd_text:${#_mpsd_block}+${#_mpsd_key}}"
  _mpsd_block="${_mpsd_block%%"$_mpsd_nl]$_mpsd_nl"*}$_mpsd_nl"
  _mpsd_dir=$_MPSD_PHYS
  while [[ -n $_mpsd_dir ]]; do
    # The control characters listed, not [[:cntrl:]]: glibc's UTF-8 locales count U+2028 and
    # U+2029 as control characters, and mpsd accepts them in a path.
    if [[ $_mpsd_dir != *[\"\\]* && $_mpsd_dir != *["$_MPSD_CONTROL"]* &&
      $_mpsd_block == *"$_mpsd_nl    \"$_mpsd_dir\",$_mpsd_nl"* ]]; then
      _mpsd_inside=1
      break
    fi
    _mpsd_dir=${_mpsd_dir%/*}
  done
  if [[ -z $_mpsd_inside && $_mpsd_block != *"$_mpsd_nl    \"/\",$_mpsd_nl"* ]]; then
    return 0
  fi
  # A missing key: the offset runs past the end, an empty value, which is invalid.
  _mpsd_key="${_mpsd_nl}high_watermark_ratio = "
  _mpsd_high=${_mpsd_text%%"$_mpsd_key"*}
  _mpsd_high=${_mpsd_text:${#_mpsd_high}+${#_mpsd_key}}
  _mpsd_high=${_mpsd_high%%"$_mpsd_nl"*}
  _mpsd_key="${_mpsd_nl}low_watermark_ratio = "
  _mpsd_low=${_mpsd_text%%"$_mpsd_key"*}
  _mpsd_low=${_mpsd_text:${#_mpsd_low}+${#_mpsd_key}}
  _mpsd_low=${_mpsd_low%%"$_mpsd_nl"*}
  _mpsd_number "$_mpsd_high"
  _mpsd_high_num=$_mpsd_num
  _mpsd_number "$_mpsd_low"
  if [[ -n $_mpsd_high_num && -n $_mpsd_num ]] && (( _mpsd_num <= _mpsd_high_num )); then
    _MPSD_WANT_HIGH=$_mpsd_high _MPSD_WANT_LOW=$_mpsd_low
  fi
}

# One of mpsd's dirs as paths.py has it -> _MPSD_DIR: $1 (MPSD_*_DIR, a leading ~ expanded),
# else $2/mps when $2 (XDG_*_HOME) is absolute, else ~/$3/mps.
_mpsd_dir() {
  emulate -L zsh
  _MPSD_DIR=$1
  if [[ -z $_MPSD_DIR ]]; then
    if [[ $2 == /* ]]; then
      _MPSD_DIR=$2/mps
    else
      _MPSD_DIR=${HOME-}/$3/mps
    fi
  fi
  case $_MPSD_DIR in
    ('~') _MPSD_DIR=${HOME-} ;;
    ('~/'*) _MPSD_DIR=${HOME-}/${_MPSD_DIR#'~/'} ;;
  esac
}

_mpsd_hook() {
  local _mpsd_status=$?
  emulate -L zsh
  local _mpsd_text=''
  # mpsd's config and data dirs, where paths.py puts them, worked out again only when one of
  # the variables they come from changed.
  local _mpsd_key=${MPSD_CONFIG_DIR-}:${XDG_CONFIG_HOME-}:${MPSD_DATA_DIR-}:${XDG_DATA_HOME-}:${HOME-}
  if [[ $_mpsd_key != "${_MPSD_FILE_KEY-}" || -z ${_MPSD_GLOB-} ]]; then
    typeset -g _MPSD_FILE_KEY=$_mpsd_key _MPSD_DIR
    _mpsd_dir "${MPSD_DATA_DIR-}" "${XDG_DATA_HOME-}" .local/share
    typeset -g _MPSD_DATA=$_MPSD_DIR
    _mpsd_dir "${MPSD_CONFIG_DIR-}" "${XDG_CONFIG_HOME-}" .config
    typeset -g _MPSD_CONF=$_MPSD_DIR _MPSD_FILE=$_MPSD_DIR/limits.toml
    # For the size check: the name as a pattern that matches only itself, from ./ when relative
    # (a leading `~` or `=` would be expanded).
    typeset -g _MPSD_GLOB=${(b)_MPSD_FILE}
    [[ $_MPSD_FILE == /* ]] || _MPSD_GLOB=./$_MPSD_GLOB
  fi
  # The size first, with a glob qualifier: one stat(2), no module to load (zsh/stat's zstat
  # would do as well, at a zmodload and its failure modes). The (b)-quoted name globs only
  # itself; `-` follows a symlink, `.` wants a plain file, `L-262145` at most 256 KiB; (N): no
  # match, no words. Larger, the file is not one mpsd wrote: ignored, never read (a 100 MB
  # file cost 2 s a prompt). Replaced by a larger one between the stat and the read, it is
  # read once and ignored from the next prompt on.
  local -a _mpsd_fit
  # eval: parsed at run time, under this function's `emulate -L zsh`; written plainly, a file
  # sourced under `emulate sh` or `emulate ksh` (no bare glob qualifiers) fails to parse.
  eval '_mpsd_fit=( ${~_MPSD_GLOB}(N-.L-262145) )'
  # The trust rule (paths.untrusted) as far as a builtin tells it: the config dir and the data
  # dir (when there is one) and limits.toml itself are the user's own (-O: a file another user
  # wrote into a dir others can write is theirs), else nothing is read, nothing exported.
  if (( $#_mpsd_fit )) && [[ -r $_MPSD_FILE && -O $_MPSD_FILE && -O $_MPSD_CONF ]] &&
    [[ -O $_MPSD_DATA || ! -e $_MPSD_DATA ]]; then
    _mpsd_text=$(<$_MPSD_FILE)
  fi
  if [[ -z ${_MPSD_PWD+x} || $PWD != "$_MPSD_PWD" || $_mpsd_text != "${_MPSD_TEXT-}" ]]; then
    typeset -g _MPSD_PWD=$PWD _MPSD_TEXT=$_mpsd_text _MPSD_PHYS=${PWD:A}
    # A NUL byte: not mpsd's file either (checked once per new text).
    [[ $_mpsd_text != *$'\0'* ]] || _mpsd_text=''
    _mpsd_parse "$_mpsd_text"
  fi
  # Set by hand: present but not what the hook exported last. Then both are the user's.
  if [[ -n ${PYTORCH_MPS_HIGH_WATERMARK_RATIO+x} && (-z ${_MPSD_EXPORTED_HIGH+x} ||
    $PYTORCH_MPS_HIGH_WATERMARK_RATIO != "${_MPSD_EXPORTED_HIGH-}") ]] ||
    [[ -n ${PYTORCH_MPS_LOW_WATERMARK_RATIO+x} && (-z ${_MPSD_EXPORTED_LOW+x} ||
    $PYTORCH_MPS_LOW_WATERMARK_RATIO != "${_MPSD_EXPORTED_LOW-}") ]]; then
    :
  elif [[ -n $_MPSD_WANT_HIGH ]]; then
    if [[ ${PYTORCH_MPS_HIGH_WATERMARK_RATIO-} != "$_MPSD_WANT_HIGH" || ${PYTORCH_MPS_LOW_WATERMARK_RATIO-} != "$_MPSD_WANT_LOW" ]]; then
      export PYTORCH_MPS_HIGH_WATERMARK_RATIO=$_MPSD_WANT_HIGH \
        PYTORCH_MPS_LOW_WATERMARK_RATIO=$_MPSD_WANT_LOW \
        _MPSD_EXPORTED_HIGH=$_MPSD_WANT_HIGH _MPSD_EXPORTED_LOW=$_MPSD_WANT_LOW
    fi
  elif [[ -n ${PYTORCH_MPS_HIGH_WATERMARK_RATIO+x}${PYTORCH_MPS_LOW_WATERMARK_RATIO+x}${_MPSD_EXPORTED_HIGH+x}${_MPSD_EXPORTED_LOW+x} ]]; then
    unset PYTORCH_MPS_HIGH_WATERMARK_RATIO PYTORCH_MPS_LOW_WATERMARK_RATIO \
      _MPSD_EXPORTED_HIGH _MPSD_EXPORTED_LOW
  fi
  return $_mpsd_status
}

# The ASCII control characters, which a project path may not hold (as mpsd.decision has it).
# Set in a function under `emulate -L zsh`: with the user's all_export, it would be exported.
() {
  emulate -L zsh
  typeset -g _MPSD_CONTROL=$'\001\002\003\004\005\006\007\010\011\012\013\014\015\016\017\020\021\022\023\024\025\026\027\030\031\032\033\034\035\036\037\177'
}

# Register once, however often this file is sourced: add-zsh-hook adds a function only once.
# chpwd too, so that `cd project && python train.py` on one line already gets the values.
if autoload -Uz +X add-zsh-hook 2>/dev/null; then
  add-zsh-hook precmd _mpsd_hook
  add-zsh-hook chpwd _mpsd_hook
else
  (( ${precmd_functions[(Ie)_mpsd_hook]} )) || precmd_functions+=(_mpsd_hook)
  (( ${chpwd_functions[(Ie)_mpsd_hook]} )) || chpwd_functions+=(_mpsd_hook)
fi
