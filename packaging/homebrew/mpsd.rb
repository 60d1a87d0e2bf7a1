# The Homebrew formula of mpsd, for a tap: a repository named homebrew-mpsd holding this file as
# Formula/mpsd.rb (`brew install mpsd/mpsd/mpsd`). At each release, once PyPI has it,
# `resources.py` beside it rewrites the url and sha256 from PyPI's JSON (the long URL PyPI serves,
# as `brew audit`'s PyPiUrls rule asks) and the resources (docs/development.md, "Releasing").
# Until the first release the url is a placeholder with an all-zero sha256.
class Mpsd < Formula
  include Language::Python::Virtualenv

  desc "Keeps PyTorch on Apple Silicon from pushing your Mac into swap"
  homepage "https://github.com/mpsd/mpsd"
  url "https://files.pythonhosted.org/packages/source/m/mpsd/mpsd-0.1.0.tar.gz"
  sha256 "0000000000000000000000000000000000000000000000000000000000000000"
  license "MIT"

  depends_on arch: :arm64 # PyTorch's MPS: Apple Silicon only
  depends_on :macos
  depends_on "python@3.13"

  # Resources: written by packaging/homebrew/resources.py from pyproject.toml.
  resource "psutil" do
    url "https://files.pythonhosted.org/packages/aa/c6/d1ddf4abb55e93cebc4f2ed8b5d6dbad109ecb8d63748dd2b20ab5e57ebe/psutil-7.2.2.tar.gz"
    sha256 "0746f5f8d406af344fd547f1c8daa5f5c33dbc293bb8d6a16d80b4bb88f59372"
  end

  resource "tomli-w" do
    url "https://files.pythonhosted.org/packages/19/75/241269d1da26b624c0d5e110e8149093c759b7a286138f4efd61a60e75fe/tomli_w-1.2.0.tar.gz"
    sha256 "2dd14fac5a47c27be9cd4c976af5a12d87fb1f0b4512f81d69cce3b35ae25021"
  end

  resource "tomlkit" do
    url "https://files.pythonhosted.org/packages/08/72/fc01563df95c189a9f65850096bdc205bc2fe37da6c740cd64afaf18d07e/tomlkit-0.15.2.tar.gz"
    sha256 "83e32755ba1d20d9340bd069ee97e9f6232ba2346b63ffcba425de01f7e327a6"
  end

  resource "watchdog" do
    url "https://files.pythonhosted.org/packages/e2/55/087e45c2a3ed8223bc9f30d6b65f051de35513cfc30c989c2b1a14bf862e/watchdog-7.1.0.tar.gz"
    sha256 "d3861e255416f49a1384474cb2efa097de165fb330d4c5432ce6708b509ed922"
  end
  # End of resources.

  def install
    virtualenv_install_with_resources
    # Homebrew puts them where each shell looks (zsh still needs compinit: see the caveats).
    generate_completions_from_executable(bin/"mpsd", "completion")
  end

  def caveats
    <<~EOS
      Homebrew does not edit your home folder. To hook your shells (zsh, bash, fish)
      and write mpsd's config, run:
        mpsd install
      then start the daemon that keeps the limits current (never with sudo: that
      runs it as root, with root's home and none of your settings):
        brew services start mpsd
      zsh completes mpsd only with its completion system on (`mpsd install` prints
      the line to add when your ~/.zshrc lacks it).

      To remove mpsd, run `mpsd uninstall` first (it stops the service and takes
      the hooks out of your rc files), then `brew uninstall mpsd`.
    EOS
  end

  # `brew services start mpsd` (never with sudo: that makes a LaunchDaemon run as root, with
  # root's home): the agent homebrew.mxcl.mpsd, in place of the one `mpsd install` would load
  # (the two would fight over the daemon's lock; `mpsd install` knows it). As mpsd's own agent
  # (launchd/io.github.mpsd.daemon.plist; a test keeps the two in step): restarted after any
  # non-zero exit, no sooner than 30 s after the last start, niced. Its LowPriorityIO has no key in the service DSL.
  service do
    run [opt_bin/"mpsd", "daemon"]
    keep_alive successful_exit: false
    throttle_interval 30
    process_type :background
    nice 10
    environment_variables LC_ALL: "C"
    working_dir var
    log_path var/"log/mpsd.log"
    error_log_path var/"log/mpsd.log"
  end

  test do
    assert_match "mpsd #{version}", shell_output("#{bin}/mpsd --version")
    (testpath/"oom.txt").write <<~EOS
      RuntimeError: MPS backend out of memory (MPS allocated: 18.02 GB, other allocations: 107.10 MB, max allowed: 18.13 GB). Tried to allocate 4.50 MB on private pool. Use PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 to disable upper limit for memory allocations (may cause system failure).
    EOS
    assert_match "MPS out of memory", shell_output("#{bin}/mpsd explain #{testpath}/oom.txt")
  end
end
