# shellcheck shell=bash
# mpsd hook for bash (3.2 and later): in a project opted in with `mpsd enable`, exports
# PYTORCH_MPS_HIGH_WATERMARK_RATIO and PYTORCH_MPS_LOW_WATERMARK_RATIO as limits.toml holds them;
# outside, takes back what it exported. Load it with `eval "$(mpsd hook bash)"` or by sourcing it.
#
# Each prompt runs builtins only, never a subprocess: limits.toml is read with one bounded `read`,
# and parsed again only when its text or $PWD changed, in one pass over its lines (time linear in
# the file). A file larger than mpsd ever writes (256 KiB), or with a NUL byte, is not read past
# that and is ignored. Values must be plain decimals in (0, 2] with low <= high to be exported
# (PyTorch reads garbage as 0.0, which removes the cap); nothing read is ever evaluated. A value
# the user set by hand (anything but what the hook last exported, which it keeps in
# _MPSD_EXPORTED_HIGH/_MPSD_EXPORTED_LOW) is the user's: both are left alone. A config or data dir
# of mpsd's that is not the user's own (`-O`) makes it export nothing (docs: the trust rule).
#
# Whatever options the user set: `set -k` makes every `name=value` word an environment
# assignment, so `local`/`export` never take one (declared first, assigned after); `set -e`:
# nothing here returns non-zero outside a condition; `set -u`: every name is set before use;
# `set -a`: switched off while the hook runs (its own variables would be exported, the file's
# text with them); nocasematch: switched off while it runs; globbing (extglob, failglob,
# nullglob): no word is ever globbed, the split into lines runs under `set -f`.

# The physical form of $PWD into _MPSD_PHYS. `cd -P .` stays in the same directory; when the
# physical path differs, `cd -L` goes back to the logical one, so that `pwd`, `dirs` and
# `cd ..` see what they saw before; PWD and OLDPWD are put back as they were.
_mpsd_physical() {
  \builtin local _mpsd_pwd _mpsd_old _mpsd_had_old
  _mpsd_pwd=${PWD-} _mpsd_old=${OLDPWD-} _mpsd_had_old=${OLDPWD+x}
  _MPSD_PHYS=''
  if CDPATH='' \builtin cd -P . >/dev/null 2>&1; then
    _MPSD_PHYS=${PWD-}
    # bash resolves the text of the logical path, but stays in the directory it is in: when a
    # symlink on that path changed since the user's cd, the text names another directory.
    # Then the physical path is unknown, and going back through the logical one would move
    # the shell there.
    if [[ ! . -ef $_MPSD_PHYS ]]; then
      _MPSD_PHYS=''
    elif [[ -n $_mpsd_pwd && $_MPSD_PHYS != "$_mpsd_pwd" ]]; then
      CDPATH='' \builtin cd -L -- "$_mpsd_pwd" >/dev/null 2>&1 || :
    fi
  fi
  # A PWD the user unset stays as `cd` set it.
  if [[ -n $_mpsd_pwd ]]; then
    PWD=$_mpsd_pwd
  fi
  if [[ -n $_mpsd_had_old ]]; then
    OLDPWD=$_mpsd_old
  else
    \builtin unset OLDPWD
  fi
}

# A ratio as the file holds it -> _mpsd_num, fixed point with 9 decimals; empty unless it is a
# plain decimal in (0, 2]. Digits listed, not ranged: before bash 5, a range follows the
# locale's collation, and another digit let through would be an arithmetic error here.
_mpsd_number() {
  _mpsd_num=''
  \builtin local _mpsd_int _mpsd_frac
  _mpsd_frac=''
  case $1 in
    [012]) _mpsd_int=$1 ;;
    [012].[0123456789]*)
      _mpsd_int=${1%%.*} _mpsd_frac=${1#*.}
      case $_mpsd_frac in *[!0123456789]*) \builtin return 0 ;; esac
      if [[ ${#_mpsd_frac} -gt 9 ]]; then \builtin return 0; fi
      ;;
    *) \builtin return 0 ;;
  esac
  _mpsd_frac=${_mpsd_frac}000000000
  _mpsd_num=$((_mpsd_int * 1000000000 + 10#${_mpsd_frac:0:9}))
  if [[ $_mpsd_num -le 0 || $_mpsd_num -gt 2000000000 ]]; then
    _mpsd_num=''
  fi
}

# Parse limits.toml's text ($1) for the physical directory: _MPSD_WANT_HIGH/_MPSD_WANT_LOW get
# both values when it is inside a project and both are valid, else both are empty. The first
# `high_watermark_ratio = ` and `low_watermark_ratio = ` lines; the project lines (`    "/path",`)
# between the first `projects = [` line and the next `]` line; the directory is inside when one
# of them is the directory or a parent of it (a path with a quote, a backslash or an ASCII
# control character in it never counts).
#
# One pass over the lines, with short patterns on each: time linear in the file. Never
# `${text%%"$key"*}`, `${text#*"$key"}` or `${text/...}` on the whole text: bash tries the pattern
# at every offset and measures the rest of the string each time (in a UTF-8 locale, converts it
# to wide characters), quadratic: 0.6 s for 4000 projects, 79 s for a 1 MB projects list.
_mpsd_parse() {
  _MPSD_WANT_HIGH='' _MPSD_WANT_LOW=''
  \builtin local IFS _mpsd_nl _mpsd_noglob _mpsd_line _mpsd_dir _mpsd_wanted _mpsd_block
  \builtin local _mpsd_inside _mpsd_high _mpsd_low _mpsd_have_high _mpsd_have_low _mpsd_num
  \builtin local _mpsd_high_num
  \builtin local -a _mpsd_lines
  _mpsd_nl=$'\n' _mpsd_block='' _mpsd_inside='' _mpsd_high='' _mpsd_low=''
  _mpsd_have_high='' _mpsd_have_low=''
  # The lines that would put the directory inside: `    "/",`, and the directory and each of its
  # parents as a project line, but for those the hook refuses (listed, not [[:cntrl:]]: glibc's
  # UTF-8 locales count U+2028 and U+2029 as control characters, and mpsd accepts them).
  _mpsd_wanted="$_mpsd_nl    \"/\",$_mpsd_nl"
  _mpsd_dir=$_MPSD_PHYS
  case $_mpsd_dir in
    *[\"\\]* | *["$_MPSD_CONTROL"]*)
      while [[ -n $_mpsd_dir ]]; do
        case $_mpsd_dir in
          *[\"\\]* | *["$_MPSD_CONTROL"]*) ;;
          *) _mpsd_wanted="$_mpsd_wanted    \"$_mpsd_dir\",$_mpsd_nl" ;;
        esac
        _mpsd_dir=${_mpsd_dir%/*}
      done
      ;;
    *)
      while [[ -n $_mpsd_dir ]]; do
        _mpsd_wanted="$_mpsd_wanted    \"$_mpsd_dir\",$_mpsd_nl"
        _mpsd_dir=${_mpsd_dir%/*}
      done
      ;;
  esac
  # Split into lines under `set -f`: a line is never globbed (`*`, `[` in a path). Empty lines
  # are dropped, which changes nothing: none is a key, a project or the end of the list.
  IFS=$_mpsd_nl
  case $- in
    *f*) _mpsd_noglob=1 ;;
    *) _mpsd_noglob='' && \builtin set -f ;;
  esac
  # shellcheck disable=SC2206 # split on newlines on purpose, with globbing off
  _mpsd_lines=($1)
  if [[ -z $_mpsd_noglob ]]; then
    \builtin set +f
  fi
  # _mpsd_block: '' before the list, 1 in it, 2 after it. Done as soon as nothing can change:
  # inside, or past the list, with both ratios seen.
  for _mpsd_line in ${_mpsd_lines[@]+"${_mpsd_lines[@]}"}; do
    case $_mpsd_line in
      '    "'*)
        if [[ $_mpsd_block == 1 && $_mpsd_wanted == *"$_mpsd_nl$_mpsd_line$_mpsd_nl"* ]]; then
          _mpsd_inside=1
          if [[ -n $_mpsd_have_high && -n $_mpsd_have_low ]]; then
            break
          fi
        fi
        ;;
      ']')
        if [[ $_mpsd_block == 1 ]]; then
          _mpsd_block=2
          if [[ -n $_mpsd_have_high && -n $_mpsd_have_low ]]; then
            break
          fi
        fi
        ;;
      'projects = [')
        if [[ -z $_mpsd_block ]]; then
          _mpsd_block=1
        fi
        ;;
      'high_watermark_ratio = '*)
        if [[ -z $_mpsd_have_high ]]; then
          _mpsd_high=${_mpsd_line#high_watermark_ratio = } _mpsd_have_high=1
        fi
        ;;
      'low_watermark_ratio = '*)
        if [[ -z $_mpsd_have_low ]]; then
          _mpsd_low=${_mpsd_line#low_watermark_ratio = } _mpsd_have_low=1
        fi
        ;;
    esac
  done
  if [[ -z $_mpsd_inside ]]; then
    \builtin return 0
  fi
  _mpsd_number "$_mpsd_high"
  _mpsd_high_num=$_mpsd_num
  _mpsd_number "$_mpsd_low"
  if [[ -n $_mpsd_high_num && -n $_mpsd_num && $_mpsd_num -le $_mpsd_high_num ]]; then
    _MPSD_WANT_HIGH=$_mpsd_high _MPSD_WANT_LOW=$_mpsd_low
  fi
}

# One of mpsd's dirs as paths.py has it -> _MPSD_DIR: $1 (MPSD_*_DIR, a leading ~ expanded),
# else $2/mps when $2 (XDG_*_HOME) is absolute, else ~/$3/mps.
_mpsd_dir() {
  _MPSD_DIR=$1
  if [[ -z $_MPSD_DIR ]]; then
    case $2 in
      /*) _MPSD_DIR=$2/mps ;;
      *) _MPSD_DIR=${HOME-}/$3/mps ;;
    esac
  fi
  case $_MPSD_DIR in
    \~) _MPSD_DIR=${HOME-} ;;
    \~/*) _MPSD_DIR=${HOME-}/${_MPSD_DIR#\~/} ;;
  esac
}

_mpsd_hook() {
  # $? first, into a global: under `set -k`, `local x=$?` would not assign x.
  _MPSD_STATUS=$?
  # _mpsd_restore: the user's options to put back at the end (a: allexport, n: nocasematch).
  \builtin local _mpsd_text _mpsd_restore
  _mpsd_text='' _mpsd_restore=''
  case $- in
    *a*) \builtin set +a && \builtin export -n _MPSD_STATUS && _mpsd_restore=a ;;
  esac
  if \builtin shopt -q nocasematch; then
    _mpsd_restore=${_mpsd_restore}n
    \builtin shopt -u nocasematch
  fi
  # mpsd's config and data dirs, where paths.py puts them, worked out again only when one of
  # the variables they come from changed.
  if [[ ${MPSD_CONFIG_DIR-}:${XDG_CONFIG_HOME-}:${MPSD_DATA_DIR-}:${XDG_DATA_HOME-}:${HOME-} != \
    "${_MPSD_FILE_KEY-}" ]]; then
    _MPSD_FILE_KEY=${MPSD_CONFIG_DIR-}:${XDG_CONFIG_HOME-}:${MPSD_DATA_DIR-}:${XDG_DATA_HOME-}:${HOME-}
    _mpsd_dir "${MPSD_DATA_DIR-}" "${XDG_DATA_HOME-}" .local/share
    _MPSD_DATA=$_MPSD_DIR
    _mpsd_dir "${MPSD_CONFIG_DIR-}" "${XDG_CONFIG_HOME-}" .config
    _MPSD_CONF=$_MPSD_DIR _MPSD_FILE=$_MPSD_DIR/limits.toml
  fi
  # bash has no builtin that tells a file's size, so the read itself is bounded: at most one
  # character past the 256 KiB cap. At the end of the file `read` fails; it succeeds only when
  # it stopped early, past the cap or at a NUL (the -d '' delimiter): a file mpsd did not write,
  # ignored like a broken one. A 100 MB file costs what 256 KiB do; one with a NUL near the
  # start costs nothing. From bash 5.1 on, this `read` takes the file in blocks; before, one
  # byte per system call (a few hundred for the file mpsd writes: well under a millisecond).
  # The trust rule (paths.untrusted) as far as a builtin tells it: the config dir and the data
  # dir (when there is one) and limits.toml itself are the user's own (-O: a file another user
  # wrote into a dir others can write is theirs), else nothing is read, nothing exported.
  if [[ -f $_MPSD_FILE && -r $_MPSD_FILE && -O $_MPSD_FILE && -O $_MPSD_CONF ]] &&
    [[ -O $_MPSD_DATA || ! -e $_MPSD_DATA ]] &&
    IFS='' \builtin read -r -d '' -n 262145 _mpsd_text 2>/dev/null <"$_MPSD_FILE"; then
    _mpsd_text=''
  fi
  if [[ -z ${_MPSD_PWD+x} || ${PWD-} != "$_MPSD_PWD" || $_mpsd_text != "${_MPSD_TEXT-}" ]]; then
    # -n counts characters, of up to 4 bytes in a UTF-8 locale: past 64 Ki of them, a new text
    # is read again under LC_ALL=C, where -n counts bytes. Not at every prompt: switching the
    # locale there and back costs more than the rest of a steady prompt.
    if [[ ${#_mpsd_text} -gt 65536 ]] &&
      LC_ALL=C IFS='' \builtin read -r -d '' -n 262145 _mpsd_text 2>/dev/null <"$_MPSD_FILE"; then
      _mpsd_text=''
    fi
    if [[ ${PWD-} != "${_MPSD_PWD-}" || -z ${_MPSD_PHYS-} ]]; then
      _mpsd_physical
    fi
    _MPSD_PWD=${PWD-} _MPSD_TEXT=$_mpsd_text
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
      PYTORCH_MPS_HIGH_WATERMARK_RATIO=$_MPSD_WANT_HIGH PYTORCH_MPS_LOW_WATERMARK_RATIO=$_MPSD_WANT_LOW
      _MPSD_EXPORTED_HIGH=$_MPSD_WANT_HIGH _MPSD_EXPORTED_LOW=$_MPSD_WANT_LOW
      \builtin export PYTORCH_MPS_HIGH_WATERMARK_RATIO PYTORCH_MPS_LOW_WATERMARK_RATIO \
        _MPSD_EXPORTED_HIGH _MPSD_EXPORTED_LOW
    fi
  elif [[ -n ${PYTORCH_MPS_HIGH_WATERMARK_RATIO+x}${PYTORCH_MPS_LOW_WATERMARK_RATIO+x}${_MPSD_EXPORTED_HIGH+x}${_MPSD_EXPORTED_LOW+x} ]]; then
    \builtin unset PYTORCH_MPS_HIGH_WATERMARK_RATIO PYTORCH_MPS_LOW_WATERMARK_RATIO \
      _MPSD_EXPORTED_HIGH _MPSD_EXPORTED_LOW
  fi
  if [[ -n $_mpsd_restore ]]; then
    case $_mpsd_restore in
      *n*) \builtin shopt -s nocasematch ;;
    esac
    case $_mpsd_restore in
      *a*) \builtin set -a ;;
    esac
  fi
  # Keep $? for what runs after us in PROMPT_COMMAND, except under `set -e`, where a non-zero
  # return from a prompt command would end the shell.
  case $- in
    *e*) \builtin return 0 ;;
  esac
  \builtin return "$_MPSD_STATUS"
}

# Under `set -a`, what this file assigns would be exported (PROMPT_COMMAND with it): not while
# it loads.
case $- in
  *a*) \builtin set +a && _MPSD_ALLEXPORT=1 ;;
  *) _MPSD_ALLEXPORT='' ;;
esac

# The ASCII control characters, which a project path may not hold (as mpsd.decision has it).
_MPSD_CONTROL=$'\001\002\003\004\005\006\007\010\011\012\013\014\015\016\017\020'
_MPSD_CONTROL=$_MPSD_CONTROL$'\021\022\023\024\025\026\027\030\031\032\033\034\035\036\037\177'

# Register once, however often this file is sourced: in bash-preexec's precmd_functions when it
# is loaded, else at the front of PROMPT_COMMAND (the string, or element 0 of the array form).
# Already in either one (bash-preexec loaded after this file keeps PROMPT_COMMAND's commands),
# it is not added again.
case " ${precmd_functions[*]-} ;${PROMPT_COMMAND[*]-};" in
  *_mpsd_hook*) ;;
  *)
    if [[ -n ${bash_preexec_imported-}${__bp_imported-} ]]; then
      precmd_functions+=(_mpsd_hook)
    else
      PROMPT_COMMAND="_mpsd_hook${PROMPT_COMMAND:+;$PROMPT_COMMAND}"
    fi
    ;;
esac
if [[ -n $_MPSD_ALLEXPORT ]]; then
  \builtin set -a
fi
\builtin unset _MPSD_ALLEXPORT
