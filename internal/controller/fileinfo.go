package controller

import (
	"github.com/paddock-dev/paddock/api"
	"github.com/paddock-dev/paddock/proto/gen/filesystem"
)

// toFileInfo converts the agent's envd-shaped entry to the REST API's.
func toFileInfo(e *filesystem.EntryInfo) api.FileInfo {
	fi := api.FileInfo{
		Name:          e.GetName(),
		Path:          e.GetPath(),
		Size:          e.GetSize(),
		Mode:          e.GetMode(),
		Owner:         e.GetOwner(),
		Group:         e.GetGroup(),
		SymlinkTarget: e.GetSymlinkTarget(),
	}
	// The agent describes a symlink as envd does, with the type of what it
	// points to; this API calls it a symlink.
	switch {
	case e.SymlinkTarget != nil:
		fi.Type = "symlink"
	case e.GetType() == filesystem.FileType_FILE_TYPE_FILE:
		fi.Type = "file"
	case e.GetType() == filesystem.FileType_FILE_TYPE_DIRECTORY:
		fi.Type = "dir"
	case e.GetType() == filesystem.FileType_FILE_TYPE_SYMLINK:
		fi.Type = "symlink"
	default:
		fi.Type = "other"
	}
	if t := e.GetModifiedTime(); t != nil {
		fi.ModifiedAt = t.AsTime().UTC()
	}
	return fi
}
