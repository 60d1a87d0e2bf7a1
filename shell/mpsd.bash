# shellcheck shell=bash
# mpsd hook for bash (3.2 and later): in a project opted in with `mpsd enable`, exports
# PYTORCH_MPS_HIGH_WATERMARK_RATIO and PYTORCH_MPS_LOW_WATERMARK_RATIO as limits.toml holds them;
# outside, takes back what it exported. Load it with `eval "$(mpsd hook bash)"` or by sourcing it.
#
# Each prompt runs builtins only, never a subprocess: limits.toml is read with `read`, and parsed
# again only when its text or $PWD changed. Values must be plain decimals in (0, 2] with
# low <= high to be exported (PyTorch reads garbage as 0.0, which removes the cap); nothing read
# is ever evaluated. A value the user set by hand (anything but what the hook last exported,
# which it keeps in _MPSD_EXPORTED_HIGH/_MPSD_EXPORTED_LOW) is the user's: both are left alone.

# The physical form of $PWD into _MPSD_PHYS. `cd -P .` stays in the same directory; when the
# physical path differs, `cd -L` goes back to the logical one, so that `pwd`, `dirs` and
# `cd ..` see what they saw before; PWD and OLDPWD are put back as they were.
_mpsd_physical() {
  \builtin local _mpsd_pwd="${PWD-}" _mpsd_old="${OLDPWD-}" _mpsd_had_old="${OLDPWD+x}"
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
  \builtin local _mpsd_int _mpsd_frac=''
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
# both values when it is inside a project and both are valid, else both are empty. Pattern
# matching on the whole text, no loop over its lines: the first `high_watermark_ratio = ` and
# `low_watermark_ratio = ` lines; the project lines (`    "/path",`) between the first
# `projects = [` line and the next `]` line; the directory is inside when it or one of its
# parents is one of them.
_mpsd_parse() {
  _MPSD_WANT_HIGH='' _MPSD_WANT_LOW=''
  \builtin local _mpsd_nl=$'\n' _mpsd_text _mpsd_high _mpsd_low _mpsd_block _mpsd_dir
  \builtin local _mpsd_inside='' _mpsd_num _mpsd_high_num _mpsd_key
  _mpsd_text="$_mpsd_nl$1$_mpsd_nl"
  # `${x%%"$key"*}` and an offset, not `${x#*"$key"}`: bash matches the latter in quadratic time.
  _mpsd_key="${_mpsd_nl}projects = [$_mpsd_nl"
  _mpsd_block=${_mpsd_text%%"$_mpsd_key"*}
  if [[ ${#_mpsd_block} -eq ${#_mpsd_text} ]]; then
    \builtin return 0
  fi
  _mpsd_block="$_mpsd_nl${_mpsd_text:${#_mpsd_block}+${#_mpsd_key}}"
  _mpsd_block="${_mpsd_block%%"$_mpsd_nl]$_mpsd_nl"*}$_mpsd_nl"
  _mpsd_dir=$_MPSD_PHYS
  while [[ -n $_mpsd_dir ]]; do
    case $_mpsd_dir in
      *[\"\\]* | *[[:cntrl:]]*) ;;
      *)
        if [[ $_mpsd_block == *"$_mpsd_nl    \"$_mpsd_dir\",$_mpsd_nl"* ]]; then
          _mpsd_inside=1
          break
        fi
        ;;
    esac
    _mpsd_dir=${_mpsd_dir%/*}
  done
  if [[ -z $_mpsd_inside && $_mpsd_block != *"$_mpsd_nl    \"/\",$_mpsd_nl"* ]]; then
    \builtin return 0
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
  if [[ -n $_mpsd_high_num && -n $_mpsd_num && $_mpsd_num -le $_mpsd_high_num ]]; then
    _MPSD_WANT_HIGH=$_mpsd_high _MPSD_WANT_LOW=$_mpsd_low
  fi
}

_mpsd_hook() {
  \builtin local _mpsd_status="$?" _mpsd_text='' _mpsd_nocase='' _mpsd_line=''
  if \builtin shopt -q nocasematch; then
    _mpsd_nocase=1
    \builtin shopt -u nocasematch
  fi
  # limits.toml: where paths.py puts it ($MPSD_CONFIG_DIR, $XDG_CONFIG_HOME/mps, ~/.config/mps),
  # worked out again only when one of these changed.
  if [[ ${MPSD_CONFIG_DIR-}:${XDG_CONFIG_HOME-}:${HOME-} != "${_MPSD_FILE_KEY-}" ]]; then
    _MPSD_FILE_KEY=${MPSD_CONFIG_DIR-}:${XDG_CONFIG_HOME-}:${HOME-}
    _MPSD_FILE=${MPSD_CONFIG_DIR-}
    if [[ -z $_MPSD_FILE ]]; then
      case ${XDG_CONFIG_HOME-} in
        /*) _MPSD_FILE=$XDG_CONFIG_HOME/mps ;;
        *) _MPSD_FILE=${HOME-}/.config/mps ;;
      esac
    fi
    case $_MPSD_FILE in
      \~) _MPSD_FILE=${HOME-} ;;
      \~/*) _MPSD_FILE=${HOME-}/${_MPSD_FILE#\~/} ;;
    esac
    _MPSD_FILE=$_MPSD_FILE/limits.toml
  fi
  if [[ -f $_MPSD_FILE && -r $_MPSD_FILE ]]; then
    if [[ -z ${_MPSD_LINEWISE-} ]]; then
      IFS='' \builtin read -r -d '' _mpsd_text 2>/dev/null <"$_MPSD_FILE" || :
    else
      while IFS='' \builtin read -r _mpsd_line || [[ -n $_mpsd_line ]]; do
        _mpsd_text="$_mpsd_text$_mpsd_line"$'\n'
      done 2>/dev/null <"$_MPSD_FILE"
    fi
  fi
  if [[ -z ${_MPSD_PWD+x} || ${PWD-} != "$_MPSD_PWD" || $_mpsd_text != "${_MPSD_TEXT-}" ]]; then
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
      \builtin export PYTORCH_MPS_HIGH_WATERMARK_RATIO="$_MPSD_WANT_HIGH" \
        PYTORCH_MPS_LOW_WATERMARK_RATIO="$_MPSD_WANT_LOW" \
        _MPSD_EXPORTED_HIGH="$_MPSD_WANT_HIGH" _MPSD_EXPORTED_LOW="$_MPSD_WANT_LOW"
    fi
  elif [[ -n ${PYTORCH_MPS_HIGH_WATERMARK_RATIO+x}${PYTORCH_MPS_LOW_WATERMARK_RATIO+x}${_MPSD_EXPORTED_HIGH+x}${_MPSD_EXPORTED_LOW+x} ]]; then
    \builtin unset PYTORCH_MPS_HIGH_WATERMARK_RATIO PYTORCH_MPS_LOW_WATERMARK_RATIO \
      _MPSD_EXPORTED_HIGH _MPSD_EXPORTED_LOW
  fi
  if [[ -n $_mpsd_nocase ]]; then
    \builtin shopt -s nocasematch
  fi
  # Keep $? for what runs after us in PROMPT_COMMAND, except under `set -e`, where a non-zero
  # return from a prompt command would end the shell.
  case $- in
    *e*) \builtin return 0 ;;
  esac
  \builtin return "$_mpsd_status"
}

# Before bash 5.1, `read -d ''` reads a file one byte per system call; line by line it reads
# in blocks. From 5.1 on, the whole file in one `read` is cheaper.
if [[ ${BASH_VERSINFO[0]} -lt 5 || (${BASH_VERSINFO[0]} -eq 5 && ${BASH_VERSINFO[1]} -lt 1) ]]; then
  _MPSD_LINEWISE=1
fi

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
